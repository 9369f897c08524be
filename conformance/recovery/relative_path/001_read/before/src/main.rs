fn main() {
    println!("ready");
}
