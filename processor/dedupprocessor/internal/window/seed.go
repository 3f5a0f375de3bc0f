package window

import "github.com/doubletake/doubletake/internal/keyhash"

// Seed is the secret that keys a Set's index hash (keyhash.Seed).
type Seed = keyhash.Seed

// NewSeed draws a random Seed.
func NewSeed() Seed { return keyhash.NewSeed() }
