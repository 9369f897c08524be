pub fn connect() {}
