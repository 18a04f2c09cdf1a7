package envd

//go:generate ./generate.sh
