// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// netConfigPath, when run.sh put it in the initramfs (--guestfwd), names the address
	// of the guest's network interface.
	netConfigPath = "/kernellab/net"
	// modulesDir holds kernel modules to load before anything else, in the order of its
	// file "order" (the control kernel's virtio-net driver: Debian builds it as a module).
	modulesDir = "/kernellab/modules"
	// moduleInitCompressedFile is MODULE_INIT_COMPRESSED_FILE of finit_module(2): the
	// kernel decompresses the .ko.xz itself (CONFIG_MODULE_DECOMPRESS).
	moduleInitCompressedFile = 4
)

// netConfig is the guest side of qemu's user network: which interface gets which address.
// run.sh writes it as one line, "iface eth0 10.0.2.15/24". There is no DHCP client in the
// initramfs and none is needed: with restrict=on the only peer is the guestfwd address in
// the same subnet, so there is no route to set either.
type netConfig struct {
	Iface string
	Addr  net.IP
	Mask  net.IPMask
}

func parseNetConfig(r io.Reader) (netConfig, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		words := strings.Fields(sc.Text())
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		if words[0] != "iface" || len(words) != 3 {
			return netConfig{}, fmt.Errorf("bad line %q: want \"iface NAME ADDR/PREFIX\"", sc.Text())
		}
		ip, ipnet, err := net.ParseCIDR(words[2])
		if err != nil || ip.To4() == nil {
			return netConfig{}, fmt.Errorf("bad address %q: want IPv4 ADDR/PREFIX", words[2])
		}
		return netConfig{Iface: words[1], Addr: ip.To4(), Mask: ipnet.Mask}, nil
	}
	if err := sc.Err(); err != nil {
		return netConfig{}, err
	}
	return netConfig{}, fmt.Errorf("no iface line")
}

// loadModules loads the modules of modulesDir in their order; a lab without the directory
// loads nothing.
func loadModules() {
	order, err := os.ReadFile(filepath.Join(modulesDir, "order"))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		logf("reading the module order: %v", err)
		return
	}
	for _, name := range strings.Fields(string(order)) {
		if err := loadModule(filepath.Join(modulesDir, filepath.Base(name))); err != nil {
			logf("error: loading module %s: %v", name, err)
			continue
		}
		logf("loaded module %s", name)
	}
}

func loadModule(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	flags := 0
	if strings.HasSuffix(path, ".xz") || strings.HasSuffix(path, ".zst") || strings.HasSuffix(path, ".gz") {
		flags = moduleInitCompressedFile
	}
	return unix.FinitModule(fd, "", flags)
}

// configureNetwork brings up lo (the agent's metrics and health listeners are on
// 127.0.0.1) and, when run.sh asked for a network, the configured interface.
func configureNetwork() {
	if err := ifaceUp("lo", nil, nil); err != nil {
		logf("error: bringing up lo: %v", err)
	}
	f, err := os.Open(netConfigPath)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		logf("error: opening %s: %v", netConfigPath, err)
		return
	}
	defer f.Close()
	cfg, err := parseNetConfig(f)
	if err != nil {
		logf("error: %s: %v", netConfigPath, err)
		return
	}
	if err := ifaceUp(cfg.Iface, cfg.Addr, cfg.Mask); err != nil {
		logf("error: configuring %s: %v", cfg.Iface, err)
		return
	}
	logf("network: %s %s/%d up", cfg.Iface, cfg.Addr, maskBits(cfg.Mask))
}

func maskBits(m net.IPMask) int {
	ones, _ := m.Size()
	return ones
}

// ifaceUp sets name's IPv4 address and netmask (when addr is not nil) and its UP flag,
// with the same ioctls ifconfig uses.
func ifaceUp(name string, addr net.IP, mask net.IPMask) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening a socket: %w", err)
	}
	defer unix.Close(fd)
	if addr != nil {
		for _, set := range []struct {
			req uint
			v   []byte
		}{{unix.SIOCSIFADDR, addr.To4()}, {unix.SIOCSIFNETMASK, net.IP(mask).To4()}} {
			ifr, err := unix.NewIfreq(name)
			if err != nil {
				return err
			}
			if err := ifr.SetInet4Addr(set.v); err != nil {
				return err
			}
			if err := unix.IoctlIfreq(fd, set.req, ifr); err != nil {
				return fmt.Errorf("ioctl %#x on %s: %w", set.req, name, err)
			}
		}
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading the flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}
