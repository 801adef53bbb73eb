# Rust: rustc builds a program that reads stdin.
set -eu
printf 'use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!("{}",v[0]+v[1]);}\n' >main.rs
rustc -O main.rs -o main
[ "$(echo 2 3 | ./main)" = 5 ]
