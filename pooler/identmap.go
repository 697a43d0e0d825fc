package pooler

import (
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
)

// resolveIdentMaps reads auth_ident_file, when set, and gives each
// auth_hba_file rule with map= its map. As in PgBouncer the file is read
// only for auth_type=hba (the only way to name a map), at start and on
// every RELOAD, with the auth_hba_file; a map= naming a map the file
// lacks is an error, so RELOAD keeps the rules in force.
func resolveIdentMaps(hba *auth.HBA, st *config.Settings) error {
	var id *auth.Ident
	if st.AuthIdentFile != "" {
		var err error
		if id, err = auth.LoadIdent(st.AuthIdentFile); err != nil {
			return err
		}
	}
	return hba.ResolveMaps(st.AuthHBAFile, id)
}
