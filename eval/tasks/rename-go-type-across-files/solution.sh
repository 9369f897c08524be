sed -i 's/\bOrderLine\b/LineItem/g' model.go parse.go total.go total_test.go
