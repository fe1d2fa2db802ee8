package config_test

import (
	"fmt"
	"log"

	"github.com/b6192125/machinist/v1/config"
)

func ExampleNewFromYaml() {
	cnf, err := config.NewFromYaml("testdata/example.yml", false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("broker:", cnf.Broker)
	fmt.Println("queue:", cnf.DefaultQueue)
	fmt.Println("lease:", cnf.LeaseDuration)
	fmt.Println("key prefix:", cnf.Redis.KeyPrefix)

	// The fields the file leaves zero get their defaults from WithDefaults,
	// as NewServer does.
	full := cnf.WithDefaults()
	fmt.Println("result backend:", full.ResultBackend)
	fmt.Println("renew every:", full.LeaseRenewInterval)
	// Output:
	// broker: redis://localhost:6379/0
	// queue: emails
	// lease: 30s
	// key prefix: myapp
	// result backend: redis://localhost:6379/0
	// renew every: 7.5s
}

func ExampleConfig_Reloaded() {
	cnf, err := config.NewFromYaml("testdata/example.yml", true)
	if err != nil {
		log.Fatal(err)
	}
	defer cnf.StopReloading()

	// cnf itself never changes. Wherever the current settings are needed,
	// ask for the latest version of the file that loaded:
	current := cnf.Reloaded()
	fmt.Println("queue:", current.DefaultQueue)
	// Output:
	// queue: emails
}

func ExampleQueueBindingArgs_Decode() {
	var args config.QueueBindingArgs
	if err := args.Decode("image-type:png,x-match:any"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(args)
	// Output:
	// map[image-type:png x-match:any]
}
