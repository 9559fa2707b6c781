# Written by zerosim sweep (docs/sweep.md "Plots"); redraw in this folder with: gnuplot throughput.gp
set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'
set output 'throughput.svg'
set multiplot layout 2,1 title "Throughput against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set yrange [0:*]
set xlabel "micro-batch per GPU (sequences), log scale"
set ylabel 'throughput (tokens/s, all GPUs)'
set title 'tokens per second (y from 0)'
plot 'throughput.dat' index 0 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 3, offload_optimizer.device none", 'throughput.dat' index 0 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory (drawn at 0)', 'throughput.dat' index 1 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 2 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 3 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle
set ylabel 'TFLOPs per GPU (model, TFLOP/s)'
set title 'model TFLOPs per GPU (y from 0)'
plot 'throughput.dat' index 0 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 3, offload_optimizer.device none", 'throughput.dat' index 0 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory (drawn at 0)', 'throughput.dat' index 1 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 2 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 3 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle
unset multiplot
unset output
set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'
set output 'throughput.png'
set multiplot layout 2,1 title "Throughput against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set yrange [0:*]
set xlabel "micro-batch per GPU (sequences), log scale"
set ylabel 'throughput (tokens/s, all GPUs)'
set title 'tokens per second (y from 0)'
plot 'throughput.dat' index 0 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:($4 == 1 ? $2 : 1/0) with linespoints title "stage 3, offload_optimizer.device none", 'throughput.dat' index 0 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory (drawn at 0)', 'throughput.dat' index 1 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 2 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 3 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle
set ylabel 'TFLOPs per GPU (model, TFLOP/s)'
set title 'model TFLOPs per GPU (y from 0)'
plot 'throughput.dat' index 0 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:($4 == 1 ? $3 : 1/0) with linespoints title "stage 3, offload_optimizer.device none", 'throughput.dat' index 0 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU memory (drawn at 0)', 'throughput.dat' index 1 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 2 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle, 'throughput.dat' index 3 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' notitle
unset multiplot
unset output
