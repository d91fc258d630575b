//go:build !race

package nfsim

const raceEnabled = false
