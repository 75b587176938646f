module github.com/ratchet/ratchet

go 1.26

require (
	github.com/dgraph-io/ristretto/v2 v2.3.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/prometheus/client_golang v1.23.2
	github.com/redis/go-redis/v9 v9.17.2
	github.com/redis/rueidis v1.0.76
	github.com/throttled/throttled/v2 v2.15.0
	github.com/tidwall/redcon v1.6.4
	github.com/ulule/limiter/v3 v3.11.2
	github.com/yuin/gopher-lua v1.1.2
	go.etcd.io/bbolt v1.4.3
	go.yaml.in/yaml/v2 v2.4.2
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/tidwall/btree v1.1.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	golang.org/x/sys v0.43.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)
