# Runs as root inside the freshly installed Debian (chroot), with no network.
set -eu

# The user E2B sandboxes run commands as: uid 1000, passwordless sudo.
groupadd --gid 1000 user
useradd --uid 1000 --gid user --groups sudo --shell /bin/bash \
	--create-home --home-dir /home/user user
printf 'user ALL=(ALL:ALL) NOPASSWD: ALL\n' >/etc/sudoers.d/user
chmod 0440 /etc/sudoers.d/user
chown -R user:user /home/user

# Agents install tools globally (pip, npm -g) and keep code in /code, without sudo.
mkdir -p /code
chmod -R a+rwX /usr/local /code

# Like E2B's images, pip installs into the system Python; Debian's PEP 668 marker would refuse.
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED

# Every command the SDK runs is `bash -l -c CMD`, so /etc/profile runs each time: read the uid from
# the shell ($EUID in bash) instead of forking id(1), which was half the login shell's cost.
sed -i 's/"$(id -u)"/"${EUID:-$(id -u)}"/' /etc/profile
grep -q 'EUID:-' /etc/profile

# Docker provides these at run time; do not keep the build host's.
: >/etc/resolv.conf
printf 'localhost\n' >/etc/hostname

rm -f /etc/dpkg/dpkg.cfg.d/warren-unsafe-io
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
	/var/log/apt/* /var/log/*.log /tmp/* /var/tmp/* /root/.cache
