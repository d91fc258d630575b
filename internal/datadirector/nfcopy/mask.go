package nfcopy

// MaskDigits hides all but the last keep digits of number, each hidden
// digit written 'x'; other characters (a leading +, * and #) stay, so a
// masked number keeps its shape: MaskDigits("+19725550101", 4) is
// "+xxxxxxx0101". keep <= 0 leaves number as it is.
func MaskDigits(number string, keep int) string {
	if keep <= 0 || number == "" {
		return number
	}
	digits := 0
	for i := 0; i < len(number); i++ {
		if number[i] >= '0' && number[i] <= '9' {
			digits++
		}
	}
	hide := digits - keep
	if hide <= 0 {
		return number
	}
	b := []byte(number)
	for i := range b {
		if hide == 0 {
			break
		}
		if b[i] >= '0' && b[i] <= '9' {
			b[i] = 'x'
			hide--
		}
	}
	return string(b)
}
