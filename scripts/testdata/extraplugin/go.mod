module example.com/sandgate-extraplugin

go 1.26

require github.com/caddyserver/caddy/v2 v2.11.9
