//! A private `libvirtd` for the tests that need a real one (QEMU driver, its own socket, its
//! own mount namespace with the QEMU driver's configuration and state directories; `virtlogd`
//! too when none runs), stopped on drop with every domain it holds.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether a virtlogd listens (a socket file left by one that exited does not count).
pub fn virtlogd_answers() -> bool {
    std::os::unix::net::UnixStream::connect("/run/libvirt/virtlogd-sock").is_ok()
}

/// A private libvirtd (and virtlogd when the host runs none), stopped on drop.
pub struct Daemon {
    dir: tempfile::TempDir,
    libvirtd: Child,
    virtlogd: Option<Child>,
}

impl Daemon {
    pub fn uri(&self) -> String {
        format!(
            "qemu:///system?socket={}",
            self.dir.path().join("sock/libvirt-sock").display()
        )
    }

    pub fn start() -> Result<Daemon, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sock = dir.path().join("sock");
        std::fs::create_dir_all(&sock).map_err(|e| e.to_string())?;
        let conf = dir.path().join("libvirtd.conf");
        std::fs::write(
            &conf,
            format!(
                "unix_sock_dir = \"{}\"\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\nlog_outputs = \"3:file:{}\"\n",
                sock.display(),
                dir.path().join("libvirtd.log").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let virtlogd = if virtlogd_answers() {
            None
        } else {
            Some(
                Command::new("virtlogd")
                    .arg("--pid-file")
                    .arg(dir.path().join("virtlogd.pid"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("virtlogd: {e}"))?,
            )
        };
        // Its own mount namespace, where the QEMU driver's configuration and state are the
        // test's: a qemu.conf running QEMU as root (where /dev/kvm is root's alone, as on
        // this machine, the stock user's capabilities never match their probe and libvirt
        // probes QEMU again on every define and start, ~45 s each), and empty directories
        // for definitions and state, so nothing the host's libvirt holds is seen or written.
        let private = dir.path().join("qemu");
        let qemu_conf = "/etc/libvirt/qemu.conf";
        if !std::path::Path::new(qemu_conf).exists() {
            return Err(format!(
                "{qemu_conf} is missing (Debian: libvirt-daemon-driver-qemu)"
            ));
        }
        std::fs::create_dir_all(&private).map_err(|e| e.to_string())?;
        let own_conf = private.join("qemu.conf");
        std::fs::write(&own_conf, "user = \"+0\"\ngroup = \"+0\"\n").map_err(|e| e.to_string())?;
        let mut script = format!(
            "set -e\nmount --bind '{}' {qemu_conf}\n",
            own_conf.display()
        );
        for (own, host) in [
            ("etc", "/etc/libvirt/qemu"),
            ("run", "/run/libvirt/qemu"),
            ("lib", "/var/lib/libvirt/qemu"),
        ] {
            let own = private.join(own);
            std::fs::create_dir_all(&own).map_err(|e| e.to_string())?;
            script.push_str(&format!(
                "mkdir -p {host}\nmount --bind '{}' {host}\n",
                own.display()
            ));
        }
        script.push_str(&format!(
            "exec libvirtd --config '{}' --pid-file '{}'\n",
            conf.display(),
            dir.path().join("libvirtd.pid").display()
        ));
        let libvirtd = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("libvirtd.err"))
                    .map_err(|e| e.to_string())?,
            ))
            .spawn()
            .map_err(|e| format!("unshare (util-linux) for libvirtd: {e}"))?;
        let d = Daemon {
            dir,
            libvirtd,
            virtlogd,
        };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if d.virsh(&["version"]).status.success() && virtlogd_answers() {
                return Ok(d);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        Err(format!(
            "libvirtd did not answer in 30 s: {}{}",
            std::fs::read_to_string(d.dir.path().join("libvirtd.err")).unwrap_or_default(),
            std::fs::read_to_string(d.dir.path().join("libvirtd.log")).unwrap_or_default()
        ))
    }

    pub fn virsh(&self, args: &[&str]) -> std::process::Output {
        Command::new("virsh")
            .arg("-c")
            .arg(self.uri())
            .args(args)
            .env("LC_ALL", "C")
            .output()
            .expect("running virsh")
    }

    /// Every domain's name; `virsh list` must succeed.
    pub fn names(&self) -> Vec<String> {
        let o = self.virsh(&["list", "--all", "--name"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        names_in(&o)
    }

    pub fn dumpxml(&self, name: &str) -> String {
        let o = self.virsh(&["dumpxml", "--inactive", name]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for name in names_in(&self.virsh(&["list", "--all", "--name"])) {
            let _ = self.virsh(&["destroy", &name]);
            let _ = self.virsh(&["undefine", "--nvram", &name]);
        }
        let _ = self.libvirtd.kill();
        let _ = self.libvirtd.wait();
        if let Some(v) = &mut self.virtlogd {
            let _ = v.kill();
            let _ = v.wait();
        }
    }
}

/// The names `virsh list --name` printed.
pub fn names_in(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// What a test with a private libvirtd and a TCG guest needs: root, libvirtd, virtlogd,
/// virsh, QEMU, busybox, a guest kernel and no libvirtd already running (it would share the
/// test's state). The guest kernel, or the named skip recorded.
pub fn prerequisites(test: &str) -> Option<std::path::PathBuf> {
    if !testkit::is_root() {
        testkit::skip(test, "needs root: it starts libvirtd");
        return None;
    }
    for bin in ["libvirtd", "virtlogd", "virsh", "qemu-system-x86_64"] {
        if testkit::which(bin).is_none() {
            testkit::skip(
                test,
                format!("{bin} is not installed (Debian: libvirt-daemon-system, libvirt-clients, qemu-system-x86)"),
            );
            return None;
        }
    }
    if !std::path::Path::new("/bin/busybox").exists()
        && !std::path::Path::new("/usr/bin/busybox").exists()
    {
        testkit::skip(test, "busybox is not installed (Debian: busybox-static)");
        return None;
    }
    let kernel = match testkit::guest_kernel() {
        Ok(k) => k,
        Err(why) => {
            testkit::skip(test, why);
            return None;
        }
    };
    if Command::new("pgrep")
        .args(["-x", "libvirtd"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        testkit::skip(
            test,
            "a libvirtd already runs here: the test starts its own, which would share its state",
        );
        return None;
    }
    Some(kernel)
}
