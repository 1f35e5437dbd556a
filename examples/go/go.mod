module gpucoll.dev/examples

go 1.19

require gpucoll.dev/gpucoll v0.1.0

// The bindings of this checkout; a module elsewhere points this at its copy of bindings/swig/go.
replace gpucoll.dev/gpucoll => ../../bindings/swig/go
