pub struct Counter {
    count: u32,
    step: u32,
}

impl Counter {
    pub fn new() -> Self {
        Counter { count: 0, step: 1 }
    }

    pub fn increment(&mut self) {
        self.count += self.step;
    }

    pub fn get(&self) -> u32 {
        self.count
    }
}
