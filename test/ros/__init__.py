"""The ROS 2 node (wb_sim.ros): its plain parts, and the node, launcher, recorder and replay as
processes over real rclpy."""
