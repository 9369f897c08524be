module example.com/loadsum

go 1.22
