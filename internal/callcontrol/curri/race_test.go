//go:build race

package curri

// raceEnabled: the race detector allocates beside the code it instruments.
const raceEnabled = true
