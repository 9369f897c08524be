module example.com/ordersvc

go 1.22
