# validation loss vs step, one line per run (regenerate: gnuplot loss_val.gp)
set termoption noenhanced
set xlabel "step"
set ylabel "validation loss (nats/token)"
set key top right
set grid
set terminal pngcairo size 900,560 noenhanced
set output "loss_val.png"
plot "loss_val.dat" index 0 with linespoints lw 2 pt 7 ps 0.6 title "ao_gpt"
set terminal svg size 900,560 noenhanced
set output "loss_val.svg"
plot "loss_val.dat" index 0 with linespoints lw 2 pt 7 ps 0.6 title "ao_gpt"
unset output
