# R: Rscript reads stdin.
set -eu
printf 'x <- scan(file("stdin"), quiet = TRUE)\ncat(x[1] + x[2], "\\n", sep = "")\n' >main.R
[ "$(echo 2 3 | Rscript main.R)" = 5 ]
