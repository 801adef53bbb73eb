# Racket: a #lang racket module reads stdin.
set -eu
printf '#lang racket\n(displayln (+ (read) (read)))\n' >main.rkt
[ "$(echo 2 3 | racket main.rkt)" = 5 ]
