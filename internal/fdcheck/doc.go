// Package fdcheck tells whether a socket descriptor another process passed
// (an online restart's SHOW FDS) is what it is said to be. Unix only: an
// online restart is refused elsewhere.
package fdcheck
