package fields

// c.go calls state's method and names a.go's type: arrows to a.go.
func begin(s *state) { s.start() }

var _ signal = nil
