const x = require("pkg");
