package fields

// flight's field start is named as state's method (a.go): reading it is no
// arrow to a.go.
type flight struct{ start uint64 }

func first(fl *flight) uint64 { return fl.start }

// unit's field signal is named as a.go's type: a literal's key is no arrow.
type unit struct{ signal string }

var traces = unit{signal: "traces"}
