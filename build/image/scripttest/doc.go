// Package scripttest holds the tests of the image's shell scripts: the iptables wrapper that
// the image ships (images/iptables-wrapper) and the .deb fetcher (build/image/debs.sh), run
// against stub binaries.
package scripttest
