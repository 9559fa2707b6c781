# Written by zerosim sweep (docs/sweep.md "Plots"); redraw in this folder with: gnuplot throughput.gp
set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'
set output 'throughput.svg'
set multiplot layout 2,1 title "Throughput against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set xlabel "micro-batch per GPU (sequences)"
set ylabel 'throughput (tokens/s, all GPUs)'
set title 'tokens per second'
plot 'throughput.dat' index 0 using 1:2 with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:2 with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:2 with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:2 with linespoints title "stage 3, offload_optimizer.device none"
set ylabel 'TFLOPs per GPU (model, TFLOP/s)'
set title 'model TFLOPs per GPU'
plot 'throughput.dat' index 0 using 1:3 with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:3 with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:3 with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:3 with linespoints title "stage 3, offload_optimizer.device none"
unset multiplot
unset output
set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'
set output 'throughput.png'
set multiplot layout 2,1 title "Throughput against batch size: llama2-70b-8xa100-200gbps.yaml"
set grid
set key outside right top
set logscale x 2
set xlabel "micro-batch per GPU (sequences)"
set ylabel 'throughput (tokens/s, all GPUs)'
set title 'tokens per second'
plot 'throughput.dat' index 0 using 1:2 with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:2 with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:2 with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:2 with linespoints title "stage 3, offload_optimizer.device none"
set ylabel 'TFLOPs per GPU (model, TFLOP/s)'
set title 'model TFLOPs per GPU'
plot 'throughput.dat' index 0 using 1:3 with linespoints title "stage 2, offload_optimizer.device cpu", 'throughput.dat' index 1 using 1:3 with linespoints title "stage 2, offload_optimizer.device none", 'throughput.dat' index 2 using 1:3 with linespoints title "stage 3, offload_optimizer.device cpu", 'throughput.dat' index 3 using 1:3 with linespoints title "stage 3, offload_optimizer.device none"
unset multiplot
unset output
