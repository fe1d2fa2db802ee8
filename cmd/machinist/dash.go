package main

import "github.com/spf13/cobra"

// dashCommand is added once the dashboard package lands.
func (a *app) dashCommand() *cobra.Command { return nil }
