// Package raw is the SWIG wrapper of gpucoll.h (raw.swig); package gpucoll is its public face.
package raw

// #cgo pkg-config: gpucoll
import "C"

// The SWIG-generated file imports these (gcswigError in gpucoll.i); the go tool reads a package's
// imports from its .go files before it runs SWIG, so they are named here too.
import (
	_ "errors"
	_ "strconv"
	_ "strings"
)
