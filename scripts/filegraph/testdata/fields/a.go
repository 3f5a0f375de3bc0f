package fields

type state struct{}

func (s *state) start() {}

type signal interface{ x() }

// Addr shares its name with a field of an imported type (d.go).
const Addr = ""
