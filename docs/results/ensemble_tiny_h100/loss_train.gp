# training loss vs step, one line per run (regenerate: gnuplot loss_train.gp)
set termoption noenhanced
set xlabel "step"
set ylabel "training loss (nats/token)"
set key top right
set grid
set terminal pngcairo size 900,560 noenhanced
set output "loss_train.png"
plot "loss_train.dat" index 0 with linespoints lw 2 pt 7 ps 0.6 title "ao_gpt"
set terminal svg size 900,560 noenhanced
set output "loss_train.svg"
plot "loss_train.dat" index 0 with linespoints lw 2 pt 7 ps 0.6 title "ao_gpt"
unset output
