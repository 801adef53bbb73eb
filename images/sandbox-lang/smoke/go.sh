# Go: build a program, build and run a test binary; the caches live under /tmp.
set -eu
printf 'package main\nimport "fmt"\nfunc main(){var a,b int;fmt.Scan(&a,&b);fmt.Println(a+b)}\n' >main.go
go build -o main main.go
[ "$(echo 2 3 | ./main)" = 5 ]
mkdir t && cd t
printf 'package main\nimport "testing"\nfunc TestAdd(t *testing.T){if 2+3!=5{t.Fatal("no")}}\n' >main_test.go
go mod init sandbox >/dev/null 2>&1
go test -c -o main.test
./main.test -test.v >/dev/null
# testify, from Debian's source packages on the GOPATH: no go.mod, nothing downloaded
cd .. && mkdir testify && cd testify
printf 'package main\nimport (\n"testing"\n"github.com/stretchr/testify/assert"\n)\nfunc TestAdd(t *testing.T){assert.Equal(t, 5, 2+3)}\n' >main_test.go
go test -c -o main.test
./main.test -test.v >/dev/null
