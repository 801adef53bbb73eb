# Java and JUnit 5: compile, run with assertions on, run a test class with the console launcher.
set -eu
printf 'import java.util.*;\npublic class Main{public static void main(String[] a){Scanner s=new Scanner(System.in);System.out.println(s.nextInt()+s.nextInt());}}\n' >Main.java
javac -encoding UTF-8 -cp . Main.java
[ "$(echo 2 3 | java -cp . -ea Main)" = 5 ]
mkdir junit && cd junit
printf 'import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\npublic class SmokeTest{@Test void adds(){assertEquals(5, 2+3);}}\n' >SmokeTest.java
jar=/usr/share/java/junit-platform-console-standalone.jar
javac -encoding UTF-8 -cp "$jar:." SmokeTest.java
java -jar "$jar" --disable-banner --class-path . --scan-class-path >/dev/null
# javatuples, on the class path SandboxFusion's java runner gives
cd .. && mkdir tuples && cd tuples
printf 'import org.javatuples.Pair;\npublic class Main{public static void main(String[] a){System.out.println(Pair.with(2, 3).getValue1());}}\n' >Main.java
javac -encoding UTF-8 -cp .:/usr/share/java/javatuples.jar Main.java
[ "$(java -cp .:/usr/share/java/javatuples.jar -ea Main)" = 3 ]
