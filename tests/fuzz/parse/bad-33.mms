test a
sysfs hugepages/hugepages-2048kB/nr_hugepages many
