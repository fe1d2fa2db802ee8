module github.com/b6192125/machinist

go 1.26

require github.com/google/uuid v1.6.0
