package pooler

import "testing"

func TestSettingOff(t *testing.T) {
	for v, want := range map[string]bool{
		"off": true, "OFF": true, "of": true, "false": true, "f": true, "fal": true, "no": true, "n": true, "0": true, " off ": true,
		"on": false, "o": false, "true": false, "t": false, "yes": false, "1": false, "": false, "offf": false,
	} {
		if got := settingOff(v); got != want {
			t.Errorf("settingOff(%q) = %v, want %v", v, got, want)
		}
	}
}
