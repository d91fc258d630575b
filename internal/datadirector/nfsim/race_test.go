//go:build race

package nfsim

// raceEnabled: the race detector allocates beside the code it instruments.
const raceEnabled = true
