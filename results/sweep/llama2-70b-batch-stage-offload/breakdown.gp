# Written by zerosim sweep (docs/sweep.md "Plots"); redraw in this folder with: gnuplot breakdown.gp
set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'
set output 'breakdown.svg'
set title "Step time per point: llama2-70b-8xa100-200gbps.yaml"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set grid ytics
set key outside right top
set xtics rotate by -45
set yrange [0:*]
set xlabel "swept values: mb, stage, offload_optimizer.device"
set ylabel 'step time (s)'
plot 'breakdown.dat' using 2:xtic(1) title "compute", 'breakdown.dat' using 3 title "optimizer", 'breakdown.dat' using 4 title "exposed communication", 'breakdown.dat' using 5 title "exposed PCIe", 'breakdown.dat' using 6 title "exposed NVMe", 'breakdown.dat' using 7 title "idle", 'breakdown.dat' using 0:($8 == 0 ? $9 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory'
unset output
set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'
set output 'breakdown.png'
set title "Step time per point: llama2-70b-8xa100-200gbps.yaml"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set grid ytics
set key outside right top
set xtics rotate by -45
set yrange [0:*]
set xlabel "swept values: mb, stage, offload_optimizer.device"
set ylabel 'step time (s)'
plot 'breakdown.dat' using 2:xtic(1) title "compute", 'breakdown.dat' using 3 title "optimizer", 'breakdown.dat' using 4 title "exposed communication", 'breakdown.dat' using 5 title "exposed PCIe", 'breakdown.dat' using 6 title "exposed NVMe", 'breakdown.dat' using 7 title "idle", 'breakdown.dat' using 0:($8 == 0 ? $9 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory'
unset output
