# Kotlin scripts and Scala on the java image's JDK: a script runs, scalac and scala run an object.
set -eu
printf 'val (a, b) = readLine()!!.trim().split(" ").map { it.toLong() }\nprintln(a + b)\n' >main.kts
[ "$(echo 2 3 | kotlinc -nowarn -script main.kts)" = 5 ]
printf 'object Main { def main(args: Array[String]): Unit = { val Array(a, b) = scala.io.StdIn.readLine().trim.split(" ").map(_.toLong); println(a + b) } }\n' >main.scala
scalac -nowarn -d . main.scala
[ "$(echo 2 3 | scala -nc -cp . Main)" = 5 ]
