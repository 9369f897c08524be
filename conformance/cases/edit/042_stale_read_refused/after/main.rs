use std::io;

fn main() {
    let x = 3;
    println!("{x}");
}
