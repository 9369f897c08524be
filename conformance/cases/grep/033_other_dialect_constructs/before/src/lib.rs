fn main() {
    the the
}
