# Written by zerosim sweep (docs/sweep.md "Plots"); redraw in this folder with: gnuplot memory.gp
set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'
set output 'memory.svg'
set title "Peak GPU memory against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set yrange [0:*]
set xlabel "micro-batch per GPU (sequences), log scale"
set ylabel 'peak GPU memory, device total (GiB; y from 0)'
capacity = 80
set label 1 sprintf('GPU capacity %.0f GiB', capacity) at graph 0.02, first capacity offset 0,0.7 tc rgb 'red'
plot 'memory.dat' index 0 using 1:2 with linespoints title "stage 2, offload_optimizer.device cpu", 'memory.dat' index 1 using 1:2 with linespoints title "stage 2, offload_optimizer.device none", 'memory.dat' index 2 using 1:2 with linespoints title "stage 3, offload_optimizer.device cpu", 'memory.dat' index 3 using 1:2 with linespoints title "stage 3, offload_optimizer.device none", 'memory.dat' index 0 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory', 'memory.dat' index 1 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'memory.dat' index 2 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'memory.dat' index 3 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, capacity with lines dashtype 2 lw 2 lc rgb 'red' title 'GPU capacity'
unset output
set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'
set output 'memory.png'
set title "Peak GPU memory against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set yrange [0:*]
set xlabel "micro-batch per GPU (sequences), log scale"
set ylabel 'peak GPU memory, device total (GiB; y from 0)'
capacity = 80
set label 1 sprintf('GPU capacity %.0f GiB', capacity) at graph 0.02, first capacity offset 0,0.7 tc rgb 'red'
plot 'memory.dat' index 0 using 1:2 with linespoints title "stage 2, offload_optimizer.device cpu", 'memory.dat' index 1 using 1:2 with linespoints title "stage 2, offload_optimizer.device none", 'memory.dat' index 2 using 1:2 with linespoints title "stage 3, offload_optimizer.device cpu", 'memory.dat' index 3 using 1:2 with linespoints title "stage 3, offload_optimizer.device none", 'memory.dat' index 0 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory', 'memory.dat' index 1 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'memory.dat' index 2 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'memory.dat' index 3 using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, capacity with lines dashtype 2 lw 2 lc rgb 'red' title 'GPU capacity'
unset output
