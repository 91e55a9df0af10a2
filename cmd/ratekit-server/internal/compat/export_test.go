package compat

// Source is compat.lua, for the tests' hooks that count its calls.
var Source = source
