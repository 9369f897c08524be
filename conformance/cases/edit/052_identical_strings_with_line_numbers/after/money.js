"use strict";

function f() {}
