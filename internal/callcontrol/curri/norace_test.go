//go:build !race

package curri

const raceEnabled = false
