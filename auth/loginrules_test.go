package auth

import (
	"errors"
	"testing"
)

// An hba rule's method runs the exchange auth_type would; cert and peer
// run none here, reject and an unknown method are no method at all.
func TestHBAMethodMethod(t *testing.T) {
	for _, tc := range []struct {
		hm   HBAMethod
		want Method
		ok   bool
	}{
		{HBATrust, MethodTrust, true},
		{HBAMD5, MethodMD5, true},
		{HBAPassword, MethodPlain, true},
		{HBASCRAM, MethodSCRAM, true},
		{HBALDAP, MethodLDAP, true},
		{HBACert, 0, true},
		{HBAPeer, 0, true},
		{HBAReject, 0, false},
		{HBAMethod(99), 0, false},
	} {
		if m, ok := tc.hm.Method(); m != tc.want || ok != tc.ok {
			t.Errorf("%v.Method() = %v %v, want %v %v", tc.hm, m, ok, tc.want, tc.ok)
		}
	}
}

// auth_type=ldap needs options that parse; pam needs a build with PAM.
func TestCheckExternal(t *testing.T) {
	if err := CheckExternal("md5", ""); err != nil {
		t.Errorf("md5: %v", err)
	}
	if err := CheckExternal("ldap", ""); err == nil {
		t.Error("ldap without auth_ldap_options accepted")
	}
	if err := CheckExternal("ldap", "ldapurl=\"ldap://ldap.example.net/dc=example,dc=net?uid?sub\""); err != nil {
		t.Errorf("ldap with a URL: %v", err)
	}
	if err := CheckExternal("pam", ""); PAMSupported != (err == nil) || !PAMSupported && !errors.Is(err, ErrPAMUnsupported) {
		t.Errorf("pam: %v (supported: %v)", err, PAMSupported)
	}
}
