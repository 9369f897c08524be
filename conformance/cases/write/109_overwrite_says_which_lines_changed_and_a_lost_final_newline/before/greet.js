function hello(name) {
  return "Hello, " + name;
}

module.exports = { hello };
