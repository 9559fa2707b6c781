# Written by zerosim sweep (docs/sweep.md "Plots"); redraw in this folder with: gnuplot compare.gp
set terminal svg size 900,600 dynamic noenhanced font 'Helvetica,12' background rgb 'white'
set output 'compare.svg'
set title 'Predicted against measured (zerosim compare)'
set grid
set key outside right top
set logscale xy
set xlabel 'measured (each figure in its unit: s, samples/s, TFLOP/s, GiB, ...)'
set ylabel 'predicted (same unit)'
plot 'compare.dat' index 0 using 1:2 with points pt 7 ps 1.2 title 'MFU', 'compare.dat' index 1 using 1:2 with points pt 7 ps 1.2 title 'TFLOPs per GPU (model)', 'compare.dat' index 2 using 1:2 with points pt 7 ps 1.2 title 'peak GPU memory, reserved', 'compare.dat' index 3 using 1:2 with points pt 7 ps 1.2 title 'tokens/s per GPU', x with lines dashtype 2 lc rgb 'gray' title 'predicted = measured'
unset output
set terminal pngcairo size 900,600 noenhanced font 'Helvetica,11' background rgb 'white'
set output 'compare.png'
set title 'Predicted against measured (zerosim compare)'
set grid
set key outside right top
set logscale xy
set xlabel 'measured (each figure in its unit: s, samples/s, TFLOP/s, GiB, ...)'
set ylabel 'predicted (same unit)'
plot 'compare.dat' index 0 using 1:2 with points pt 7 ps 1.2 title 'MFU', 'compare.dat' index 1 using 1:2 with points pt 7 ps 1.2 title 'TFLOPs per GPU (model)', 'compare.dat' index 2 using 1:2 with points pt 7 ps 1.2 title 'peak GPU memory, reserved', 'compare.dat' index 3 using 1:2 with points pt 7 ps 1.2 title 'tokens/s per GPU', x with lines dashtype 2 lc rgb 'gray' title 'predicted = measured'
unset output
