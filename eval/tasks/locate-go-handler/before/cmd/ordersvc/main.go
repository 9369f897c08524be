package main

import (
	"flag"
	"log"
	"net/http"

	"example.com/ordersvc/internal/server"
	"example.com/ordersvc/internal/store"
)

func main() {
	addr := flag.String("addr", ":8081", "listen address")
	flag.Parse()

	st := store.NewMemory()
	srv := server.New(st)
	log.Printf("ordersvc listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, srv))
}
